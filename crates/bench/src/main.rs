//! rnfsd-bench: load generator for rnfsd (and any NFSv3 server) on our client
//! library. Every run is bounded in time and count and talks to 127.0.0.1
//! unless told otherwise.
//!
//! This file parses the command line and dispatches; `cli` holds the
//! command line, each command its own module.

mod ceiling;
mod chart;
mod cli;
mod copy;
mod handles;
mod local;
mod matrix;
mod ops;
mod prepare;
mod print;
mod proc_cost;
mod report;
mod run;
mod session;
mod stats;
mod storm;
mod v41;
mod v4mem;
mod vers;
mod workload;

use std::process::ExitCode;

use clap::Parser;

use cli::{Cli, Cmd};

fn main() -> ExitCode {
    let cli = Cli::parse();
    // No runtime for the ceiling server: idle threads of its own only.
    let cmd = match cli.cmd {
        Cmd::Ceiling(a) => return exit(ceiling::ceiling_cmd(a)),
        cmd => cmd,
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("rnfsd-bench: tokio: {e}");
            return ExitCode::FAILURE;
        }
    };
    exit(dispatch(cmd, &rt))
}

/// Run one command (all but `ceiling`) to its end.
fn dispatch(cmd: Cmd, rt: &tokio::runtime::Runtime) -> Result<(), String> {
    match cmd {
        Cmd::Prepare {
            dir,
            files,
            dirs,
            seed_size,
            file_size,
            threads,
        } => prepare::prepare_cmd(&dir, files, dirs, seed_size, file_size, threads),
        Cmd::Handles(a) => rt.block_on(handles::handles_cmd(a)),
        Cmd::Storm(a) => rt.block_on(storm::storm_cmd(a)),
        // NFSv4.1 runs are v41's: the v3 modules know nothing of them.
        Cmd::Run(a) if a.vers == vers::Vers::V41 => rt.block_on(v41::run_cmd(a)),
        Cmd::V4Memory(a) => rt.block_on(v4mem::mem_cmd(a)),
        Cmd::Copy(a) => rt.block_on(copy::copy_cmd(a)),
        Cmd::Run(a) => rt.block_on(run::run_cmd(a)),
        Cmd::PoolMatrix(a) => rt.block_on(matrix::run(a)),
        Cmd::Create(a) if a.target.vers == vers::Vers::V41 => {
            rt.block_on(v41::create_cmd(a, false))
        }
        Cmd::Create(a) => rt.block_on(ops::create_cmd(a, false)),
        Cmd::Mkdir(a) if a.target.vers == vers::Vers::V41 => rt.block_on(v41::create_cmd(a, true)),
        Cmd::Mkdir(a) => rt.block_on(ops::create_cmd(a, true)),
        Cmd::Fsmark(a) => rt.block_on(ops::fsmark_cmd(a)),
        Cmd::Mount(a) => rt.block_on(ops::mount_cmd(a)),
        Cmd::Read(a) if a.target.vers == vers::Vers::V41 => rt.block_on(v41::io_cmd(a, true)),
        Cmd::Read(a) => rt.block_on(ops::io_cmd(a, true)),
        Cmd::Write(a) if a.target.vers == vers::Vers::V41 => rt.block_on(v41::io_cmd(a, false)),
        Cmd::Write(a) => rt.block_on(ops::io_cmd(a, false)),
        Cmd::Ceiling(_) => Ok(()), // run by main, without a runtime
        Cmd::LocalCreate(a) => local::create_cmd(a),
        Cmd::LocalFsmark(a) => local::fsmark_cmd(a),
        Cmd::Report { json, labels, out } => report::report_cmd(&json, &labels, out.as_deref()),
        Cmd::Chart {
            json,
            out,
            title,
            workload,
        } => print::chart_cmd(&json, &out, &title, workload.as_deref()),
    }
}

/// A command's outcome as the exit status, the error on stderr.
fn exit(r: Result<(), String>) -> ExitCode {
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rnfsd-bench: {e}");
            ExitCode::FAILURE
        }
    }
}
