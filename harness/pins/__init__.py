"""Pinned files: sources.json, verification, downloads, archives, pin-template."""
