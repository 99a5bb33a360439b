"""Model providers: one adapter per wire format, all speaking shopfloor's own message model."""
