//! Test support: start the real rnfsd binary on an ephemeral loopback port.
#![allow(dead_code)]

pub mod blockdev;
pub mod nfs;
pub mod nfs4;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

static SEQ: AtomicU32 = AtomicU32::new(0);

/// Skips a test that cannot run here, saying why: true (the caller then
/// returns) when `why` is Some. Under CI, which installs what the tests need
/// and runs as root, a skip would hide a failure: it fails instead.
pub fn skip(what: &str, why: Option<String>) -> bool {
    let Some(why) = why else {
        return false;
    };
    assert!(
        std::env::var_os("CI").is_none(),
        "{what} cannot run under CI: {why}"
    );
    eprintln!("SKIP {what}: {why}");
    true
}

/// Writes `text` to DIR/rnfsd.toml; returns the file's path.
pub fn write_config(dir: &Path, text: &str) -> String {
    let p = dir.join("rnfsd.toml");
    std::fs::write(&p, text).expect("write rnfsd.toml");
    p.to_str().expect("UTF-8 path").to_owned()
}

/// An `[[export]]` table for `path`, open to 127.0.0.1 from any port with
/// root not squashed (the tests act as root), then `extra` keys.
pub fn export_table(path: &Path, extra: &str) -> String {
    format!(
        "[[export]]\npath = \"{}\"\nclients = [\"127.0.0.1\"]\nsecure = false\nroot_squash = false\n{extra}",
        path.display()
    )
}

/// A fresh directory under the system temp dir, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!(
            "rnfsd-test-{}-{}-{}",
            tag,
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("create temp dir");
        TempDir(p.canonicalize().expect("canonical temp dir"))
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A running rnfsd serving one directory. Killed on drop.
pub struct TestServer {
    child: Option<Child>,
    pub export: PathBuf,
    pub state: TempDir,
    pub addr: SocketAddr,
    extra: Vec<String>,
    /// Environment variables set for the server (`start_env`).
    env: Vec<(String, String)>,
    /// `export` is passed as the DIR argument (false: the exports come from
    /// a --config file and `export` is only the path clients MNT).
    serve_dir: bool,
}

impl TestServer {
    /// Serve `export` on 127.0.0.1 with a fresh state directory.
    pub fn start(export: &Path) -> TestServer {
        Self::start_with(export, &[])
    }

    /// As `start`, with extra arguments. The tests act as root and exercise
    /// root-only operations (chown, mknod, files owned by root), so root is
    /// not squashed here unless the test asks for the server's defaults with
    /// `start_defaults`.
    pub fn start_with(export: &Path, extra: &[&str]) -> TestServer {
        let mut args = extra.to_vec();
        if !args.contains(&"--no-root-squash") && !args.contains(&"--config") {
            args.push("--no-root-squash");
        }
        Self::start_defaults(export, &args)
    }

    /// Exactly `extra` on top of the server's defaults (root_squash on).
    pub fn start_defaults(export: &Path, extra: &[&str]) -> TestServer {
        Self::start_env(export, extra, &[])
    }

    /// As `start_defaults`, the server's environment with `env` added (the
    /// test process's own is left as it is: tests run side by side).
    pub fn start_env(export: &Path, extra: &[&str], env: &[(&str, &str)]) -> TestServer {
        Self::start_in(export, TempDir::new("state"), extra, env)
    }

    /// As `start_env`, in the state directory `state` (which the caller
    /// may have seeded: the power-cut test puts its `nfs4` directory, the
    /// NFSv4 client records, on the filesystem it cuts).
    pub fn start_in(
        export: &Path,
        state: TempDir,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> TestServer {
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let (child, addr) = spawn(Some(export), state.path(), &extra, &env);
        TestServer {
            child: Some(child),
            export: export.to_path_buf(),
            state,
            addr,
            extra,
            env,
            serve_dir: true,
        }
    }

    /// Serve only the exports of the config file `config` (no DIR argument,
    /// root not squashed unless the file says so), in the state directory
    /// `state` (which the caller may have seeded, e.g. with another server's
    /// handle.key: see `copy_handle_key`). `mount_path` is the export path
    /// clients MNT (`nfs::mount` uses it).
    pub fn start_config(
        config: &Path,
        mount_path: &Path,
        state: TempDir,
        extra: &[&str],
    ) -> TestServer {
        Self::start_config_env(config, mount_path, state, extra, &[])
    }

    /// As `start_config`, the server's environment with `env` added.
    pub fn start_config_env(
        config: &Path,
        mount_path: &Path,
        state: TempDir,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> TestServer {
        let mut extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        extra.push("--config".into());
        extra.push(config.to_str().expect("UTF-8 config path").into());
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let (child, addr) = spawn(None, state.path(), &extra, &env);
        TestServer {
            child: Some(child),
            export: mount_path.to_path_buf(),
            state,
            addr,
            extra,
            env,
            serve_dir: false,
        }
    }

    /// A fresh state directory holding a copy of this server's handle key
    /// (mode 0600), for a second server that must accept this one's
    /// handles.
    pub fn copy_handle_key(&self, tag: &str) -> TempDir {
        use std::os::unix::fs::PermissionsExt;
        let dir = TempDir::new(tag);
        let to = dir.path().join("handle.key");
        std::fs::copy(self.state.path().join("handle.key"), &to).expect("copy handle.key");
        std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o600))
            .expect("chmod handle.key");
        dir
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// The server's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// SIGHUP: the server re-reads its configuration.
    pub fn hup(&self) {
        let pid = self.pid().expect("server running");
        let st = Command::new("kill")
            .args(["-HUP", &pid.to_string()])
            .status()
            .expect("kill -HUP");
        assert!(st.success(), "kill -HUP {pid}");
    }

    /// Stop with SIGTERM and wait; returns the exit status code.
    pub fn stop(&mut self) -> Option<i32> {
        let mut child = self.child.take()?;
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(Some(st)) = child.try_wait() {
                return st.code();
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stop and start again with the same export and state directory (same
    /// handle key), as an operator restart would. The port may change.
    pub fn restart(&mut self) {
        self.stop();
        self.respawn();
    }

    /// SIGKILL and wait: nothing of the server's runs after this.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Start again (after `stop` or `kill`) with the same export, state
    /// directory and arguments.
    pub fn respawn(&mut self) {
        let dir = self.serve_dir.then_some(self.export.as_path());
        let (child, addr) = spawn(dir, self.state.path(), &self.extra, &self.env);
        self.child = Some(child);
        self.addr = addr;
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Whether the server binary knows `--insecure` (asked once).
fn has_insecure_flag(bin: &Path) -> bool {
    static KNOWS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *KNOWS.get_or_init(|| {
        Command::new(bin)
            .args(["serve", "--help"])
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("--insecure"))
    })
}

fn spawn(
    export: Option<&Path>,
    state: &Path,
    extra: &[String],
    env: &[(String, String)],
) -> (Child, SocketAddr) {
    let port_file = state.join("port");
    let _ = std::fs::remove_file(&port_file);
    let log = std::fs::File::create(state.join("server.log")).expect("log file");
    // RNFSD_TEST_BIN runs the tests against another build (an older one,
    // to show a test fails there).
    let bin = std::env::var_os("RNFSD_TEST_BIN")
        .map_or_else(|| env!("CARGO_BIN_EXE_rnfsd").into(), PathBuf::from);
    let mut child = Command::new(&bin)
        .arg("serve")
        .args(export)
        .args(["--listen", "127.0.0.1:0", "--port-file"])
        .arg(&port_file)
        .arg("--state-dir")
        .arg(state)
        // Test clients call from ordinary ports; tests of the `secure`
        // default ask for it with --secure (exports from a --config file
        // say `secure = false` themselves). Builds from before `secure`
        // was the default (RNFSD_TEST_BIN) have no --insecure and need none.
        // It is an option of DIR: without one there is nothing to pass.
        .args(
            (export.is_some()
                && !extra.iter().any(|a| a == "--secure" || a == "--insecure")
                && has_insecure_flag(&bin))
            .then_some("--insecure"),
        )
        .args(extra)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("spawn rnfsd");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(s) = std::fs::read_to_string(&port_file) {
            if let Ok(port) = s.trim().parse::<u16>() {
                return (child, SocketAddr::from(([127, 0, 0, 1], port)));
            }
        }
        // Fail fast if it exited (bad arguments, export missing); never leave
        // a stray server or a zombie behind on the way out.
        let exited = matches!(child.try_wait(), Ok(Some(_)));
        if exited || Instant::now() >= deadline {
            if !exited {
                let _ = child.kill();
            }
            let status = child.wait();
            panic!(
                "rnfsd did not write its port file ({status:?}); log: {}",
                std::fs::read_to_string(state.join("server.log")).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
