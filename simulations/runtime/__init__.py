"""The runtime and the Python API: launching runs (local backend, Ray, warm workers, shared federations), the
console, overrides."""
