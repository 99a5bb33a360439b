"""`shopfloor bench`: measurements taken side by side with their reference in one run."""
