"""The tables built from parsed runs: each run's rows (`rows`, kept by `rowcache`),
their assembly into pandas frames (`build`, `counters`) and the Parquet/CSV files
(`tablefiles`).
"""
