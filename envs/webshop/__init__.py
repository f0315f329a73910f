"""WebShop: the original shopping task on a generated catalogue (issue 14; in progress: the reward first)."""
