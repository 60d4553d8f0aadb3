"""The search engine, beside the gate: it searches inside the gate's scopes and never decides visibility.

memories/retrieval.py is its public face (memory_search, circle_memory_search, ...); the
gate (memories/gate.py) decides who sees what. Modules, each importing only those above it:

- settings: the tuning constants, read at call time as `settings.NAME` (patch them here);
- hints: per-process hints that choose a strategy (owner sizes, open counts);
- statements: a search's transaction, prepared statements, the side runner, HNSW settings;
- knn, knn_open, vector: the vector side (the owner's paths, the agents' open-gate
  paths and the kept copies of open vectors, and the strategy choosing among them);
- fulltext: the full-text side and highlights;
- fusion: reciprocal rank fusion, the relevance cut-off, loading results through the gate;
- hybrid: memory_search; circles: circle_memory_search, circle_memory_timeline;
- related: memory_similar, memory_related.

Each module reaches another's names through the module (`statements._fetch_prepared(...)`,
`settings.EXACT_CANDIDATES_MAX`), looked up at call time: a test patches a name in the one
module that defines it, and every caller sees the patch.
"""
