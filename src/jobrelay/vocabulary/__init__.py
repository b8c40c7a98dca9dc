"""The project's vocabulary, pure: the names jobrelay writes on objects and what they mean.

Each meaning has one home here: the label and annotation keys (``names``), a
typed view over any raw object's metadata (``meta``), reading and writing the
placement annotations (``placement``), the values of a WorkerCluster's spec
(``workercluster``), and where a kind is served (``resource``). Nothing here
does I/O or reads a clock.
"""
