"""The load generator (`bench`, the sweeps, notebooks 03 and 09): what to send (`workload`), when
(`arrivals`), one streamed request (`client`), what it measured (`metrics`), and the run (`runner`)."""
