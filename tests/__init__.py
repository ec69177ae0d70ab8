"""r2bench's tests, in tiers: unit/, integration/, system/ (tests/conftest.py says what each may use)."""
