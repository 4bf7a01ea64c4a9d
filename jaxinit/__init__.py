"""jaxinit: initialization scale, memory and bias in deep networks."""
