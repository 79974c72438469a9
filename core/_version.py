"""cmpx's version, in a module of its own so that any module can read it without importing the package's
public API (cmpx/__init__.py re-exports it)."""

__version__ = "0.1.0"
