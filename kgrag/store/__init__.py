"""Storage: parquet tables through polars, vectors in embedded LanceDB."""
