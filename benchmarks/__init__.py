"""Every benchmark of Keepsake, in one room.

`python manage.py bench_<name>` runs one (benchmarks/management/commands/); they
share seeding.py (the synthetic journals, their indexes and the state they are
measured in), searches.py (the search paths measured and their exact
references) and timing.py (timers, percentiles, recall, the load average).
relevance.py and sensitivity.py score the relevance cut-off and the sensitivity
classifier on the labelled sets in data/. Benchmarks print figures; their tests
(tests/benchmarks/) assert only that the figures are there and sane, never time.
"""
