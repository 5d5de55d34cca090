package node

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"
)

// Image is a FROM scratch image made of one static binary, written by
// [WriteImageArchive] as an OCI image layout archive that `ctr images
// import` reads, so that the node's containerd gets its images without a
// registry.
type Image struct {
	// Ref is the image's full name in containerd, e.g.
	// "docker.io/library/drill-reference:local" (the normalized form of
	// the name "drill-reference:local" a pod spec gives).
	Ref string
	// Binary is the path of the static binary put at /<base name> in the
	// image.
	Binary string
	// Entrypoint and Cmd are the image's ENTRYPOINT and CMD.
	Entrypoint, Cmd []string
	// User is the image's USER ("uid:gid"), empty for root.
	User string
	// Env is the image's ENV (KEY=VALUE), e.g. "PATH=/" so that a pod's
	// command may name the binary by its base name, as drill's manifests
	// do ("drill"): runc looks argv[0] up in the container's PATH.
	Env []string
}

// blob is one content-addressed file of the layout.
type blob struct {
	digest string // "sha256:<hex>"
	size   int64
	path   string // file holding the bytes, or empty when data holds them
	data   []byte
}

func jsonBlob(v any) (blob, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return blob{}, err
	}
	sum := sha256.Sum256(b)
	return blob{digest: "sha256:" + hex.EncodeToString(sum[:]), size: int64(len(b)), data: b}, nil
}

// WriteImageArchive writes img as an OCI image layout tar archive at path:
// one uncompressed layer holding img.Binary at /<base name> (mode 0755,
// owned by root, modification time zero so that the same binary gives the
// same digest), its config (linux, the Go runtime's architecture) and a
// manifest named img.Ref through the "io.containerd.image.name" annotation.
// tmpDir holds the layer while it is hashed. Errors name the step and file.
func WriteImageArchive(path, tmpDir string, img Image) error {
	layer, err := writeLayer(tmpDir, img.Binary)
	if err != nil {
		return err
	}
	defer os.Remove(layer.path)

	type descriptor struct {
		MediaType   string            `json:"mediaType"`
		Digest      string            `json:"digest"`
		Size        int64             `json:"size"`
		Annotations map[string]string `json:"annotations,omitempty"`
	}
	config, err := jsonBlob(map[string]any{
		"architecture": runtime.GOARCH,
		"os":           "linux",
		"created":      time.Unix(0, 0).UTC().Format(time.RFC3339),
		"config":       map[string]any{"Entrypoint": img.Entrypoint, "Cmd": img.Cmd, "User": img.User, "Env": img.Env},
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{layer.digest}},
	})
	if err != nil {
		return fmt.Errorf("image %s: config: %w", img.Ref, err)
	}
	manifest, err := jsonBlob(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        descriptor{MediaType: "application/vnd.oci.image.config.v1+json", Digest: config.digest, Size: config.size},
		"layers":        []descriptor{{MediaType: "application/vnd.oci.image.layer.v1.tar", Digest: layer.digest, Size: layer.size}},
	})
	if err != nil {
		return fmt.Errorf("image %s: manifest: %w", img.Ref, err)
	}
	index, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.index.v1+json",
		"manifests": []descriptor{{
			MediaType: "application/vnd.oci.image.manifest.v1+json", Digest: manifest.digest, Size: manifest.size,
			Annotations: map[string]string{"io.containerd.image.name": img.Ref},
		}},
	})
	if err != nil {
		return fmt.Errorf("image %s: index: %w", img.Ref, err)
	}

	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("image %s: create archive: %w", img.Ref, err)
	}
	tw := tar.NewWriter(f)
	add := func(name string, b blob) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: b.size, Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if b.path == "" {
			_, err := tw.Write(b.data)
			return err
		}
		src, err := os.Open(b.path)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(tw, src)
		return err
	}
	hexOf := func(d string) string { return d[len("sha256:"):] }
	err = add("oci-layout", blob{data: []byte(`{"imageLayoutVersion":"1.0.0"}`), size: int64(len(`{"imageLayoutVersion":"1.0.0"}`))})
	for _, b := range []blob{layer, config, manifest} {
		if err == nil {
			err = add("blobs/sha256/"+hexOf(b.digest), b)
		}
	}
	if err == nil {
		err = add("index.json", blob{data: index, size: int64(len(index))})
	}
	if err == nil {
		err = tw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("image %s: write %s: %w", img.Ref, path, err)
	}
	return nil
}

// writeLayer writes a tar holding binary at /<base name> into tmpDir and
// returns it as a blob (its digest is also the layer's diff ID: the layer
// is not compressed).
func writeLayer(tmpDir, binary string) (blob, error) {
	src, err := os.Open(binary)
	if err != nil {
		return blob{}, fmt.Errorf("image layer: %w", err)
	}
	defer src.Close()
	st, err := src.Stat()
	if err != nil {
		return blob{}, fmt.Errorf("image layer: %w", err)
	}
	out, err := os.CreateTemp(tmpDir, "layer-*.tar")
	if err != nil {
		return blob{}, fmt.Errorf("image layer: %w", err)
	}
	h := sha256.New()
	cw := &countWriter{w: io.MultiWriter(out, h)}
	tw := tar.NewWriter(cw)
	err = tw.WriteHeader(&tar.Header{Name: filepath.Base(binary), Mode: 0o755, Size: st.Size(), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)})
	if err == nil {
		_, err = io.Copy(tw, src)
	}
	if err == nil {
		err = tw.Close()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(out.Name())
		return blob{}, fmt.Errorf("image layer of %s: %w", binary, err)
	}
	return blob{digest: "sha256:" + hex.EncodeToString(h.Sum(nil)), size: cw.n, path: out.Name()}, nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
