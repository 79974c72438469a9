"""Plugins: the typed registries that registration hooks fill, the plugin manager factory, entry points, and the base class a backend implements (light: a worker imports it without pluggy)."""
