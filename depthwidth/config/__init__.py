"""Configuration: Hydra composition of ``conf/`` (compose.py), the fast composer
for sweeps (fast.py, checked against Hydra), the typed schema of the run
settings (schema.py) and run identity (identity.py)."""
