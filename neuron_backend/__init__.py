"""neuron_backend package."""
