"""Frozen task panels and the generators that make them."""
