"""shopfloor: an event-driven software factory on Temporal (kernel package)."""
