//! `nena gateway`'s caps on what its LAN hosts make it hold and how fast (docs/GATEWAY.md, "Bounds"):
//! the options and their defaults, those of nena-transport's `gateway::bounds::Caps`.
use nena_transport::proxy::gateway::bounds::Caps;
use nena_transport::proxy::gateway::rates::Rates;

#[derive(clap::Args, Debug)]
pub struct CapsArgs {
    /// Datagram flows (LAN sockets carried, each in a nena session) of one LAN host at
    /// once; a new one closes the host's least recently used flow.
    #[arg(long, value_name = "N", default_value_t = Caps::default().flows_per_host)]
    pub max_flows_per_host: usize,
    /// Datagram flows of all LAN hosts at once; a new one closes the least recently used.
    #[arg(long, value_name = "N", default_value_t = Caps::default().flows)]
    pub max_flows: usize,
    /// DNS queries in flight of one LAN host; more are answered SERVFAIL at once.
    #[arg(long, value_name = "N", default_value_t = Caps::default().dns_per_host)]
    pub max_dns_per_host: usize,
    /// DNS queries in flight of all LAN hosts; more are answered SERVFAIL at once.
    #[arg(long, value_name = "N", default_value_t = Caps::default().dns)]
    pub max_dns: usize,
    /// TCP connections carried at once for one LAN host (all hosts: --max-sessions); more
    /// are reset.
    #[arg(long, value_name = "N", default_value_t = Caps::default().tcp_per_host)]
    pub max_sessions_per_host: usize,
    /// New datagram flows a second of one LAN host (bursts of twice it); a new flow's
    /// datagram over it is dropped. 0: no limit.
    #[arg(long, value_name = "N", default_value_t = Rates::default().flows_per_host)]
    pub flow_rate_per_host: u32,
    /// New datagram flows a second of all LAN hosts (bursts of twice it). 0: no limit.
    #[arg(long, value_name = "N", default_value_t = Rates::default().flows)]
    pub flow_rate: u32,
    /// DNS queries a second of one LAN host (bursts of twice it); more are answered
    /// SERVFAIL at once. 0: no limit.
    #[arg(long, value_name = "N", default_value_t = Rates::default().dns_per_host)]
    pub dns_rate_per_host: u32,
    /// DNS queries a second of all LAN hosts (bursts of twice it). 0: no limit.
    #[arg(long, value_name = "N", default_value_t = Rates::default().dns)]
    pub dns_rate: u32,
}

impl CapsArgs {
    pub fn caps(&self) -> Caps {
        Caps {
            flows_per_host: self.max_flows_per_host,
            flows: self.max_flows,
            dns_per_host: self.max_dns_per_host,
            dns: self.max_dns,
            tcp_per_host: self.max_sessions_per_host,
            rates: Rates {
                flows_per_host: self.flow_rate_per_host,
                flows: self.flow_rate,
                dns_per_host: self.dns_rate_per_host,
                dns: self.dns_rate,
            },
        }
    }
}
