"""Record real pages with their DNS and replay them in the lab (docs/replay.md)."""
