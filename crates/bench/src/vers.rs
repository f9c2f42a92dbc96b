//! Which NFS version a command speaks (`--vers`).

/// Which NFS version a command speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Vers {
    /// NFSv3 with MOUNT v3.
    #[default]
    #[value(name = "3")]
    V3,
    /// NFSv4.1 sessions.
    #[value(name = "4.1")]
    V41,
}
