//! The four algorithms: their kernel names, parsing, and their compiled BPF objects.

/// The four algorithms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Algo {
    /// RFC 6356 Linked Increases.
    Lia,
    /// Opportunistic Linked Increases (Khalili et al.).
    Olia,
    /// Balanced Linked Adaptation (Peng et al.).
    Balia,
    /// Equally-Weighted TCP (the LTE study's Algorithm 2).
    Ewtcp,
}

impl Algo {
    /// Every algorithm, in the order `all` loads them.
    pub const ALL: [Algo; 4] = [Algo::Lia, Algo::Olia, Algo::Balia, Algo::Ewtcp];

    /// The name the kernel registers (TCP_CONGESTION, `ip route ... congctl`).
    pub fn name(self) -> &'static str {
        match self {
            Algo::Lia => "nena_lia",
            Algo::Olia => "nena_olia",
            Algo::Balia => "nena_balia",
            Algo::Ewtcp => "nena_ewtcp",
        }
    }

    /// `lia` or `nena_lia` (any case) -> Algo.
    pub fn parse(s: &str) -> Option<Algo> {
        let l = s.to_ascii_lowercase();
        let short = l.strip_prefix("nena_").unwrap_or(&l);
        Algo::ALL.into_iter().find(|a| &a.name()[5..] == short)
    }
}

impl std::fmt::Display for Algo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
