//! The command line: every subcommand. Each command's arguments live with
//! the command (`run::RunArgs`, `ops::CreateArgs`, ...), so no command
//! imports this module.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::{ceiling, handles, local, matrix, ops, run, storm};

#[derive(Parser)]
#[command(name = "rnfsd-bench", about = "Benchmarks for rnfsd", version)]
pub struct Cli {
    #[command(subcommand)]
    pub cmd: Cmd,
}

#[derive(Subcommand)]
pub enum Cmd {
    /// Drive a running server: calls/s and latency for each stream count.
    Run(run::RunArgs),
    /// Make a tree of files for the traverse and --handles mixes (local
    /// syscalls).
    Prepare {
        /// Directory to fill (created; must not exist or be empty).
        dir: PathBuf,
        #[arg(long, default_value_t = 20_000)]
        files: usize,
        #[arg(long, default_value_t = 1_000)]
        dirs: usize,
        /// The rsync tree of the SVC_MAX_WAKING thread instead: 161,480
        /// files in 10,841 directories
        /// (overrides --files and --dirs).
        #[arg(long)]
        seed_size: bool,
        /// Bytes per file (at most 16 MiB): the file's number as 8 bytes,
        /// repeated; 4096 or more gives the read mix full READs.
        #[arg(long, default_value_t = 8)]
        file_size: usize,
        /// Create on T threads, each filling whole directories (the same
        /// tree: names, placement and contents); for trees of millions of
        /// files. Without it: one thread, as before.
        #[arg(long)]
        threads: Option<usize>,
    },
    /// Walk the export (READDIRPLUS, several directories at once) and save
    /// disjoint samples of its non-root handles, hex, one per line.
    Handles(handles::HandlesArgs),
    /// Warm GETATTR p50/p99/max alone, then while cold streams GETATTR
    /// handles the server must look for (retrying JUKEBOX): the cold-handle
    /// storm after a host reboot or a server restart.
    Storm(storm::StormArgs),
    /// The service-core matrix: start rnfsd with each worker count and pool
    /// policy, run each mix at each stream count, alternating configurations
    /// run by run, and report medians and ratios.
    PoolMatrix(matrix::MatrixArgs),
    /// N CREATEs (UNCHECKED, or GUARDED) in one fresh directory by C
    /// concurrent creators, then REMOVE of them: creates/s and removes/s.
    Create(ops::CreateArgs),
    /// N MKDIRs in one fresh directory, then RMDIR of them.
    Mkdir(ops::CreateArgs),
    /// fs_mark-like: files of 4 KiB written UNSTABLE then COMMITted, per
    /// iteration files/s with min/max/stddev across iterations.
    Fsmark(ops::FsmarkArgs),
    /// MNT + GETATTR latency (p50, p99) over K repetitions.
    Mount(ops::MountArgs),
    /// NFSv4.1 state's memory in the server (its VmRSS): per bare
    /// connection, per idle client with a session, per open file.
    #[command(name = "v4-memory")]
    V4Memory(crate::v4mem::MemArgs),
    /// Sequential 1 MiB READ throughput (the file is written first).
    Read(ops::IoArgs),
    /// Sequential 1 MiB WRITE throughput (UNSTABLE + COMMIT, or FILE_SYNC).
    Write(ops::IoArgs),
    /// A no-work RPC server (MNT and empty successes only): the machine's
    /// ceiling for calls/s, run beside the servers by compare.sh.
    Ceiling(ceiling::CeilingArgs),
    /// Local-filesystem reference for `create`: std::fs creates + removes.
    LocalCreate(local::LocalArgs),
    /// Local-filesystem reference for `fsmark`: 4 KiB write + fsync per file.
    LocalFsmark(local::LocalArgs),
    /// One NFSv4.2 COPY of a whole file within the server, timed to its
    /// end (reply or CB_OFFLOAD) and to the COMMIT after it (JSON).
    Copy(crate::copy::CopyArgs),
    /// Medians over repeated runs per workload, stream count and label, with
    /// the ratios of the first label to the others (Markdown tables).
    Report {
        /// JSON-lines result files.
        #[arg(long, required = true, num_args = 1..)]
        json: Vec<PathBuf>,
        /// Column order, comma separated; ratios are of the first label.
        #[arg(long, value_delimiter = ',')]
        labels: Vec<String>,
        /// Also write the report as JSON here.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// SVG chart of rate against client streams from JSON lines.
    Chart {
        /// JSON lines written by --json.
        #[arg(long)]
        json: PathBuf,
        #[arg(long)]
        out: PathBuf,
        #[arg(long, default_value = "rnfsd-bench")]
        title: String,
        /// Only rows of this workload (or mix); one line per label then.
        #[arg(long)]
        workload: Option<String>,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vers::Vers;
    use crate::workload::Mix;

    #[test]
    fn run_arguments_parse() {
        let cli = Cli::try_parse_from([
            "rnfsd-bench",
            "run",
            "--export",
            "/x",
            "--mix",
            "lookup",
            "--handles",
            "1000",
            "--conns",
            "0",
            "--streams",
            "16,64",
        ])
        .unwrap();
        let Cmd::Run(a) = cli.cmd else {
            panic!("not run")
        };
        assert_eq!((a.mix, a.handles, a.conns), (Mix::Lookup, 1000, 0));
        assert_eq!(a.streams, vec![16, 64]);
        for m in ["null", "getattr", "access", "read", "write", "traverse"] {
            assert!(
                Cli::try_parse_from(["rnfsd-bench", "run", "--export", "/x", "--mix", m]).is_ok()
            );
        }
        // --vers: 3 by default, 4.1 by name, nothing else.
        let vers = |extra: &[&str]| {
            let mut args = vec!["rnfsd-bench", "run", "--export", "/x"];
            args.extend_from_slice(extra);
            Cli::try_parse_from(args).map(|c| match c.cmd {
                Cmd::Run(a) => a.vers,
                _ => panic!("not run"),
            })
        };
        assert_eq!(vers(&[]).unwrap(), Vers::V3);
        assert_eq!(vers(&["--vers", "4.1"]).unwrap(), Vers::V41);
        assert_eq!(vers(&["--vers", "3"]).unwrap(), Vers::V3);
        assert!(vers(&["--vers", "4"]).is_err());
        assert!(Cli::try_parse_from([
            "rnfsd-bench",
            "run",
            "--export",
            "/x",
            "--mix",
            "open-read-close",
            "--vers",
            "4.1"
        ])
        .is_ok());
        let cli = Cli::try_parse_from(["rnfsd-bench", "create", "--export", "/x", "--vers", "4.1"])
            .unwrap();
        assert!(matches!(cli.cmd, Cmd::Create(a) if a.target.vers == Vers::V41));
        let cli = Cli::try_parse_from(["rnfsd-bench", "prepare", "/tmp/t", "--file-size", "4096"])
            .unwrap();
        assert!(matches!(
            cli.cmd,
            Cmd::Prepare {
                file_size: 4096,
                ..
            }
        ));
    }
}
