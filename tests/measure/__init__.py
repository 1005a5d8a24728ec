"""The test scenarios measured many times: the same scripts as the tests, run in a loop to
report delays (faults.py, elastic_recovery.py) or run for minutes (fuzz_protocols.py).
Not collected by pytest; each is ``python tests/measure/<name>.py --help``. Their results
go to lab/results/ and are tabled in docs/reliability.md and docs/elastic.md."""
