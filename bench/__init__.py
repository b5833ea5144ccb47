"""Benchmarks: sparkmirror vs Apache MirrorMaker 2 vs a raw consume->produce loop."""
