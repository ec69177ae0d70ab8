"""The paper's figures, each with the claim it illustrates checked on the data."""
