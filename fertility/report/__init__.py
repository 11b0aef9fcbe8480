"""Renderers: the terminal table and CSV (text.py), the gate verdict (gate.py), the
self-contained HTML report (html.py). Nothing here measures or decides."""
