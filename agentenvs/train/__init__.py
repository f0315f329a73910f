"""The reference GRPO trainer."""
