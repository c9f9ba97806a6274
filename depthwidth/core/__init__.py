"""What every stage shares: errors and exit codes (errors.py), atomic writes
(atomic.py), the run store's paths and manifest (store.py) and provenance
(provenance.py).  Imports nothing else of dw."""
