//! Server-side cost of a run, read from /proc for a server on this machine:
//! CPU seconds (all threads, including exited ones, from /proc/PID/stat) and
//! context switches (summed over /proc/PID/task/*/status).

use std::fs;

#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProcSample {
    /// utime + stime in seconds.
    pub cpu_s: f64,
    pub voluntary: u64,
    pub involuntary: u64,
    pub threads: u64,
}

impl ProcSample {
    pub fn read(pid: u32) -> std::io::Result<ProcSample> {
        let stat = fs::read_to_string(format!("/proc/{pid}/stat"))?;
        // Fields after the parenthesised command name; utime and stime are
        // fields 14 and 15 (1-based) of proc(5).
        let after = stat.rsplit_once(')').map(|x| x.1).unwrap_or("");
        let f: Vec<&str> = after.split_whitespace().collect();
        let tick = clock_ticks() as f64;
        let ut = f.get(11).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
        let st = f.get(12).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
        let mut s = ProcSample {
            cpu_s: (ut + st) as f64 / tick,
            ..Default::default()
        };
        for t in fs::read_dir(format!("/proc/{pid}/task"))?.flatten() {
            let Ok(txt) = fs::read_to_string(t.path().join("status")) else {
                continue;
            };
            s.threads += 1;
            for line in txt.lines() {
                if let Some(v) = line.strip_prefix("voluntary_ctxt_switches:") {
                    s.voluntary += v.trim().parse::<u64>().unwrap_or(0);
                } else if let Some(v) = line.strip_prefix("nonvoluntary_ctxt_switches:") {
                    s.involuntary += v.trim().parse::<u64>().unwrap_or(0);
                }
            }
        }
        Ok(s)
    }

    /// Two phases' costs together (threads: the later count).
    pub fn plus(&self, other: &ProcSample) -> ProcSample {
        ProcSample {
            cpu_s: self.cpu_s + other.cpu_s,
            voluntary: self.voluntary + other.voluntary,
            involuntary: self.involuntary + other.involuntary,
            threads: other.threads,
        }
    }

    /// The cost between two samples.
    pub fn delta(&self, later: &ProcSample) -> ProcSample {
        ProcSample {
            cpu_s: later.cpu_s - self.cpu_s,
            voluntary: later.voluntary.saturating_sub(self.voluntary),
            involuntary: later.involuntary.saturating_sub(self.involuntary),
            threads: later.threads,
        }
    }
}

/// The process's resident set size (VmRSS of /proc/PID/status), KiB.
pub fn rss_kib(pid: u32) -> Option<u64> {
    let s = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// USER_HZ; 100 on every Linux architecture we run on (proc(5)).
fn clock_ticks() -> u64 {
    100
}
