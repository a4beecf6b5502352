//! The kinds of fault the schedule injects, in schedule order.

/// A kind of fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Fault {
    /// SIGKILL the leader, then start a new replica.
    Kill,
    /// SIGTERM the leader, then start a new replica.
    Term,
    /// SIGSTOP the leader for longer than the lease, then SIGCONT.
    Stop,
    /// Restart the apiserver.
    ApiserverRestart,
    /// Cut only the leader's relay to the apiserver for longer than the lease.
    RelayCut,
    /// Run a replica with its wall clock several minutes off, and make it lead.
    ClockSkew,
    /// Pause etcd for longer than the renew deadline.
    EtcdPause,
    /// Replace the replicas one by one with the other build.
    RollingUpdate,
}

impl Fault {
    /// Every fault, in schedule order.
    pub const ALL: [Fault; 8] = [
        Fault::Kill,
        Fault::Term,
        Fault::Stop,
        Fault::ApiserverRestart,
        Fault::RelayCut,
        Fault::ClockSkew,
        Fault::EtcdPause,
        Fault::RollingUpdate,
    ];

    /// A short name.
    pub fn name(self) -> &'static str {
        match self {
            Fault::Kill => "SIGKILL",
            Fault::Term => "SIGTERM",
            Fault::Stop => "SIGSTOP/SIGCONT",
            Fault::ApiserverRestart => "apiserver restart",
            Fault::RelayCut => "relay cut",
            Fault::ClockSkew => "clock skew",
            Fault::EtcdPause => "etcd pause",
            Fault::RollingUpdate => "rolling update",
        }
    }

    /// Whether it hits the whole control plane rather than one group's leader.
    pub fn is_global(self) -> bool {
        matches!(self, Fault::ApiserverRestart | Fault::EtcdPause)
    }
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.name())
    }
}
