"""The reliability suite (``make test-reliability``): its ``ledger`` fixture lives in tests/conftest.py,
so that the real-cluster scenarios elsewhere (a node failure, a queue limit, a retry) record
into the same ledger."""
