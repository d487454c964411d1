"""Radio models in physical units: 3GPP channels, link abstraction, units."""
