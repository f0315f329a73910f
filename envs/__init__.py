"""Environments, one subpackage each."""
