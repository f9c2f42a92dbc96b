#!/usr/bin/perl
# POSIX byte-range locks (fcntl F_SETLK/F_SETLKW with a struct flock) for
# the lock workloads, in the guest (over NLM or NFSv4) and on the host
# (ns.sh, a local process on the export). Perl, no modules: it starts in a
# fraction of a second under TCG, where python3 took seconds.
#
#   lockf.pl try FILE START LEN ex|sh
#       exit 0: granted (and released), 1: refused (EAGAIN/EACCES), 2: error
#   lockf.pl hold FILE START LEN ex|sh READY SECS [wait]
#       take the lock (F_SETLKW with "wait", else F_SETLK; READY.trying
#       is created just before asking), create READY (holding the pid),
#       hold it SECS seconds or until SIGTERM, then unlock and exit 0
# LEN 0 means to the end of the file (and beyond).
# No modules (not even strict or constant): each costs the guest seconds
# of lookups over 9p under TCG.
# x86_64 Linux (host and guest): fcntl.h's commands and lock types, errno's
# values, and struct flock { short l_type, l_whence; off_t l_start, l_len;
# pid_t l_pid; } (32 bytes with its padding).
my ($F_SETLK, $F_SETLKW, $F_RDLCK, $F_WRLCK, $F_UNLCK) = (6, 7, 0, 1, 2);
my ($EAGAIN, $EACCES, $O_RDWR, $O_CREAT) = (11, 13, 2, 64);
sub flock_t { pack('s s x4 q q i x4', $_[0], 0, $_[1], $_[2], 0) }

my ($mode, $path, $start, $len, $kind, $ready, $secs, $wait) = @ARGV;
defined $kind && $kind =~ /^(ex|sh)$/ && $mode =~ /^(try|hold)$/ && $start =~ /^\d+$/ && $len =~ /^\d+$/
  or do { print STDERR "usage: lockf.pl try|hold FILE START LEN ex|sh [READY SECS [wait]]\n"; exit 2 };
$mode eq 'try' || defined $secs or do { print STDERR "hold needs READY and SECS\n"; exit 2 };
# A read lock needs a descriptor open for reading, a write lock one open
# for writing (fcntl(2)): open read-write, creating the file.
sysopen(my $fh, $path, $O_RDWR | $O_CREAT, 0666) or do { print STDERR "open $path: $!\n"; exit 2 };
my $block = $mode eq 'hold' && ($wait // '') eq 'wait';
if ($mode eq 'hold') {
    open(my $t, '>', "$ready.trying") or do { print STDERR "$ready.trying: $!\n"; exit 2 };
    close $t;
}
my $type = $kind eq 'ex' ? $F_WRLCK : $F_RDLCK;
unless (fcntl($fh, $block ? $F_SETLKW : $F_SETLK, flock_t($type, $start, $len))) {
    my $e = $! + 0;
    if ($e == $EAGAIN || $e == $EACCES) { print STDERR "refused: $!\n"; exit 1 }
    print STDERR "lock: $!\n";
    exit 2;
}
if ($mode eq 'try') {
    fcntl($fh, $F_SETLK, flock_t($F_UNLCK, $start, $len));
    exit 0;
}
my $stop = 0;
$SIG{TERM} = sub { $stop = 1 };
my $r;
open($r, '>', "$ready.tmp") && print($r "$$\n") && close($r) && rename("$ready.tmp", $ready)
  or do { print STDERR "$ready: $!\n"; exit 2 };
my $end = time + $secs;
select(undef, undef, undef, 0.1) while !$stop && time < $end;
fcntl($fh, $F_SETLK, flock_t($F_UNLCK, $start, $len));
close $fh;
exit 0;
