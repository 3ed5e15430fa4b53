"""Messages between two agents working at once (coop execution) as a variant: the channel, the node that takes the
other agent's messages in before each step, the `send_message` action."""
