"""The run folder, the on-disk contract both ways: its file names and format version
(`runformat`), writing it (`store`), reading it back (`runmodel`), and its
`provenance.json` (`provenance`).
"""
