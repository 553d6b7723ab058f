package source

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/sluicegw/sluice/api"
)

// ErrCorruptState is wrapped by every error about a state file that exists but
// cannot be trusted: not JSON, not the State shape, another namespace, or a
// published document that fails api.DecodePublished (strict rules,
// validation, checksum). The error names the file and the reason. A node must
// not start on an empty rule set in its place: an operator repairs or removes
// the file.
var ErrCorruptState = errors.New("corrupt state file")

// ErrStateDir is wrapped by errors about a state dir that cannot be used: it
// cannot be created, is not a directory, or is not writable.
var ErrStateDir = errors.New("state dir is not usable")

// State is what a node keeps on disk for one namespace, in
// <state-dir>/<namespace>.json: the last document it applied from etcd, and
// what it needs to keep ordering across restarts.
type State struct {
	// Namespace is the namespace the document belongs to.
	Namespace string `json:"namespace"`
	// Published is the applied document exactly as it was read from etcd: the
	// value of the ruleset key, or the published document of the canary. It
	// is an api.Published in JSON and is checked with api.DecodePublished
	// when loaded.
	Published json.RawMessage `json:"published"`
	// Canary is true when the document is a canary version rather than the
	// namespace's published one.
	Canary bool `json:"canary,omitempty"`
	// PublishedVersion is the highest version of the ruleset key the node has
	// accepted. A ruleset value older than it is refused, after a restart
	// too.
	PublishedVersion int64 `json:"publishedVersion"`
	// Revision is the etcd revision the document was read at (0 if unknown).
	Revision int64 `json:"revision,omitempty"`
	// SavedAt is when the file was written.
	SavedAt time.Time `json:"savedAt"`
	// Envelope is the signed etcd value Published came from, byte for byte
	// as read (base64 in the file, so that no encoder can touch the signed
	// bytes): the ruleset key's value, or the canary key's for a canary (see
	// api.Signer); absent when the value was not signed. VerifyState checks
	// it.
	Envelope []byte `json:"envelope,omitempty"`

	// Doc is Published decoded and checked; LoadState sets it.
	Doc *api.Published `json:"-"`
}

// StatePath is the state file of a namespace in dir.
func StatePath(dir, ns string) string { return filepath.Join(dir, ns+".json") }

// maxStateBytes bounds a state file: a published document is at most
// api.MaxDocumentBytes of rules plus a small envelope, possibly escaped.
const maxStateBytes = 2*api.MaxDocumentBytes + 64<<10

// LoadState reads and checks the state file of namespace ns in dir. It returns
// an error wrapping fs.ErrNotExist when there is none, one wrapping
// ErrCorruptState (naming the file and the reason) when the file cannot be
// trusted, and a plain error when it cannot be read.
func LoadState(dir, ns string) (*State, error) {
	if !api.ValidID(ns) {
		return nil, fmt.Errorf("loading state: invalid namespace %q", ns)
	}
	path := StatePath(dir, ns)
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("loading state: %w", err)
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, maxStateBytes+1))
	if err != nil {
		return nil, fmt.Errorf("loading state %s: %w", path, err)
	}
	corrupt := func(format string, args ...any) error {
		return fmt.Errorf("%w %s: %s", ErrCorruptState, path, fmt.Sprintf(format, args...))
	}
	if len(data) > maxStateBytes {
		return nil, corrupt("larger than %d bytes", maxStateBytes)
	}
	var st State
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil {
		return nil, corrupt("not a state document: %v", err)
	}
	if dec.More() {
		return nil, corrupt("trailing data after the state document")
	}
	if st.Namespace != ns {
		return nil, corrupt("holds namespace %q, want %q", st.Namespace, ns)
	}
	doc, err := api.DecodePublished(st.Published)
	if err != nil {
		return nil, corrupt("%v", err)
	}
	if doc.Rules.Namespace != ns {
		return nil, corrupt("rules are for namespace %q, want %q", doc.Rules.Namespace, ns)
	}
	if st.PublishedVersion < 0 || (!st.Canary && st.PublishedVersion < doc.Version) {
		return nil, corrupt("published version %d does not fit document version %d", st.PublishedVersion, doc.Version)
	}
	st.Doc = doc
	return &st, nil
}

// ErrUnsignedState is wrapped by VerifyState's errors: the state file is not
// signed by a trusted key, or its signature does not cover what it holds.
// A node refuses such a file like an unsigned etcd value: it boots from etcd
// as if there were none.
var ErrUnsignedState = errors.New("state file not trusted")

// VerifyState checks a state file that LoadState accepted against the
// node's trusted keys: its Envelope must open with v under the key it was
// read from (keys.RuleSet or keys.Canary of the namespace), and
// PublishedVersion may not exceed the signed document's version (a floor
// above it could only be forged: it would make the node refuse every real
// version as older). On success Published and Doc are replaced by the
// signed document, so nothing unsigned in the file is used. Errors wrap
// ErrUnsignedState and, for signature failures, api.ErrUnsigned,
// api.ErrUnknownKey or api.ErrBadSignature.
func VerifyState(st *State, v *api.Verifier, keys api.Keys) error {
	key := keys.RuleSet(st.Namespace)
	if st.Canary {
		key = keys.Canary(st.Namespace)
	}
	bad := func(err error) error { return fmt.Errorf("%w: %w", ErrUnsignedState, err) }
	if len(st.Envelope) == 0 {
		return bad(fmt.Errorf("%w: the state file carries no signed envelope", api.ErrUnsigned))
	}
	payload, _, err := v.Open(key, st.Envelope)
	if err != nil {
		return bad(err)
	}
	signed := payload
	if st.Canary {
		c, _, err := api.DecodeCanary(payload)
		if err != nil {
			return bad(err)
		}
		signed = c.Published
	}
	doc, err := api.DecodePublished(signed)
	if err != nil {
		return bad(err)
	}
	if doc.Rules.Namespace != st.Namespace {
		return bad(fmt.Errorf("the signed rules are for namespace %q", doc.Rules.Namespace))
	}
	if st.Doc != nil && (st.Doc.Version != doc.Version || st.Doc.Checksum != doc.Checksum) {
		return bad(fmt.Errorf("%w: the file's document (version %d) is not the one signed (version %d)", api.ErrBadSignature, st.Doc.Version, doc.Version))
	}
	if st.PublishedVersion > doc.Version {
		return bad(fmt.Errorf("published version %d is above the signed document's version %d", st.PublishedVersion, doc.Version))
	}
	st.Published, st.Doc = bytes.Clone(signed), doc
	return nil
}

// SaveState writes st atomically to StatePath(dir, st.Namespace): to a
// temporary file in the same dir, synced, renamed over the old file, and the
// dir synced, so a crash leaves either the old or the new file, never a
// partial one. It sets st.SavedAt when zero.
func SaveState(dir string, st *State) error {
	if !api.ValidID(st.Namespace) {
		return fmt.Errorf("saving state: invalid namespace %q", st.Namespace)
	}
	if st.SavedAt.IsZero() {
		st.SavedAt = time.Now().UTC()
	}
	data, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("saving state: %w", err)
	}
	return writeAtomic(StatePath(dir, st.Namespace), append(data, '\n'))
}

func writeAtomic(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return fmt.Errorf("writing %s: %w", tmp.Name(), err)
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("syncing %s: %w", tmp.Name(), err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", tmp.Name(), err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("renaming to %s: %w", path, err)
	}
	if err = syncDir(dir); err != nil {
		return err
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("syncing dir %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing dir %s: %w", dir, err)
	}
	return nil
}

// CheckStateDir makes sure dir can hold state files: it creates it (0700)
// when missing and writes, syncs and removes a probe file. Errors wrap
// ErrStateDir and name the dir.
func CheckStateDir(dir string) error {
	if dir == "" {
		return fmt.Errorf("%w: no path given", ErrStateDir)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrStateDir, dir, err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrStateDir, dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: %s is not a directory", ErrStateDir, dir)
	}
	probe, err := os.CreateTemp(dir, ".probe-*")
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrStateDir, dir, err)
	}
	name := probe.Name()
	_, werr := probe.Write([]byte("sluice\n"))
	if werr == nil {
		werr = probe.Sync()
	}
	cerr := probe.Close()
	rerr := os.Remove(name)
	if err := errors.Join(werr, cerr, rerr); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrStateDir, dir, err)
	}
	return nil
}

// isNotExist reports whether err says a state file is missing.
func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
