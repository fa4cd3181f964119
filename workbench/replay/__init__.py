"""Shadow replay: capture a service's own traffic, replay it on another configuration, judge every request.

`proxy` + `recorder` (the capture proxy), `imports` (Mooncake, GuideLLM, vLLM logs), `send` + `schedule`
(the timed replay), `parity` (the verdict per request), `latency`, `report`, `handoff` (to `twin`); the
use cases are in `api`.
"""
