"""One run's model: a run folder's outputs parsed and judged (`parsedrun`, `outcome`,
`evidence`), its recovery metrics (`metrics`, `recovery`), and the two ways into a
run folder from outside a sweep: `r2bench parse` (`parseview`) and `r2bench import`
(`importer`).
"""
