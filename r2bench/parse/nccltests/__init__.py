"""Readers of nccl-tests output, one module per thing read.

- `text`: the text printed on stdout, as one run (`parse_text`) or every run it holds
  (`iter_runs`, `parse_text_runs`); `RunParser` is its streaming pass.
- `jsonfile`: the `-J` JSON file (`parse_json`).
- `runs`: a text output cut into runs no header separates, and a text/JSON pair combined.
- `salvage`: what broken output still holds (rows that lost a column, a JSON file cut short).
- `table`, `columns`: a run's `#` lines and result rows, and the columns of its table.
- `collective`: which collective an output measured.
- `state`, `lines`: a run being read, and the lines of a source.

Every reader returns a `parse.models.ParsedNcclTests`.
"""
