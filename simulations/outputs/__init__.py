"""What every driver and analysis writes: tables (CSV, JSON Lines, Markdown) and plots (matplotlib PNG),
through the one module :mod:`simulations.outputs.writers`."""
