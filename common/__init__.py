"""Pieces every app may use and that know no app: the bottom layer, below teams."""
