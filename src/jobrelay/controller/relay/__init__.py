"""The relay reconciler: snapshot → decide (pure) → act (executor), for every kind."""
