#!/usr/bin/perl
# tree.pl make DIR N: a deterministic tree of N regular files (plus dirs,
#   symlinks, hard links), varied sizes, modes, owners and mtimes.
# tree.pl manifest DIR: one line per entry: path, type, mode, uid, gid,
#   size (not for dirs), nlink (files), mtime, link target, sha256.
use strict;
use warnings;
use Digest::SHA;
use File::Find;

my ($cmd, $root, $n) = @ARGV;
die "usage: tree.pl make DIR N | manifest DIR\n" unless $cmd && $root;

if ($cmd eq 'make') {
    srand(1813);
    my @modes = (0644, 0644, 0644, 0600, 0755, 0700, 0444, 0640, 04755, 02750, 0664);
    my @dirs = ('');
    for my $d (1 .. 120) {
        my $parent = $dirs[int(rand(@dirs))];
        my $name = $parent . ($d % 7 == 0 ? "/dir with space $d" : "/d$d");
        mkdir("$root$name") or die "mkdir $name: $!";
        push @dirs, $name;
    }
    mkdir("$root/empty-dir") or die;
    mkdir("$root/" . ("L" x 200)) or die;    # a long name
    push @dirs, "/" . ("L" x 200);
    # Content: slices of one pseudo-random pool (fast under emulation).
    my $pool = pack('N*', map { int(rand(2**32)) } 1 .. 262144);
    my $files = 0;
    my @made;
    while ($files < $n) {
        my $dir = $dirs[int(rand(@dirs))];
        my $r = rand();
        # Mostly small, as in a source tree; a few large.
        my $size = $r < 0.30 ? 0 : $r < 0.83 ? int(rand(3000)) : $r < 0.98 ? int(rand(16384)) : int(rand(262144));
        my $name = "$dir/f$files" . ($files % 97 == 0 ? "-\x{e9}t\x{e9}" : "") . ($files % 13 == 0 ? ".txt" : "");
        utf8::encode($name);
        open(my $fh, '>', "$root$name") or die "create $name: $!";
        binmode $fh;
        print $fh substr($pool, int(rand(length($pool) - $size)), $size);
        close($fh) or die;
        push @made, $name;
        $files++;
    }
    # Hard links and symlinks among the files.
    for my $i (0 .. 59) {
        my $t = $made[int(rand(@made))];
        link("$root$t", "$root$t.hl$i") or die "link: $!";
    }
    for my $i (0 .. 99) {
        my $t = $made[int(rand(@made))];
        symlink($i % 2 ? "$root$t" : "../no-such-target-$i", "$root$dirs[int(rand(@dirs))]/sl$i") or die "symlink: $!";
    }
    # Owners, modes and times last (the mode may forbid writing).
    my $k = 0;
    for my $f (@made) {
        chown($k % 5 == 0 ? 1000 : 0, $k % 7 == 0 ? 1001 : 0, "$root$f");
        chmod($modes[$k % @modes], "$root$f");
        my $t = 1_000_000_000 + $k * 4099;
        utime($t, $t, "$root$f");
        $k++;
    }
    for my $d (reverse @dirs[1 .. $#dirs]) {
        chmod($k++ % 5 == 0 ? 0750 : 0755, "$root$d");
        utime(1_200_000_000 + $k, 1_200_000_000 + $k, "$root$d");
    }
    exit 0;
}

if ($cmd eq 'manifest') {
    my @lines;
    find({ no_chdir => 1, wanted => sub {
        my $p = $File::Find::name;
        return if $p eq $root;
        my @st = lstat($p) or die "lstat $p: $!";
        my $rel = substr($p, length($root));
        my $mode = $st[2];
        my $type = -l _ ? 'l' : -d _ ? 'd' : -f _ ? 'f' : '?';
        my ($size, $nlink, $extra) = ($st[7], $st[3], '');
        if ($type eq 'f') {
            $extra = Digest::SHA->new(256)->addfile($p, 'b')->hexdigest;
        } elsif ($type eq 'l') {
            $extra = readlink($p);
            $nlink = '-';
        } else {
            $size = '-';    # directory sizes differ between filesystems
            $nlink = '-';
        }
        # Symlink mtimes: tar sets them (lutimes) but not all do; skip.
        my $mtime = $type eq 'l' ? '-' : $st[9];
        push @lines, sprintf("%s %s %o %d %d %s %s %s %s", $rel, $type, $mode & 07777, $st[4], $st[5], $size, $nlink, $mtime, $extra);
    } }, $root);
    print "$_\n" for sort @lines;
    exit 0;
}
die "unknown command $cmd\n";
