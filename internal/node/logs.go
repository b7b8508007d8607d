package node

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// serveLogs serves the kubelet's container-log endpoint on the node's address, so
// `kubectl logs` works: the API server proxies GET
// /containerLogs/<namespace>/<pod>/<container> to it. It answers with the log file the
// container writes; tailLines, limitBytes and follow are honoured. Dev mode: the
// endpoint is only reachable from this host and asks for no client certificate.
func (n *Node) serveLogs(ctx context.Context) (func(), error) {
	cert, err := selfSignedCert(n.net.gw)
	if err != nil {
		return nil, err
	}
	l, err := tls.Listen("tcp", net.JoinHostPort(n.net.gw.String(), strconv.Itoa(n.opts.KubeletPort)), &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	if err != nil {
		return nil, fmt.Errorf("serve container logs: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", n.containerLogs)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.FromContext(ctx).Error(err, "Container-log endpoint failed")
		}
	}()
	return func() { _ = srv.Close() }, nil
}

func (n *Node) containerLogs(w http.ResponseWriter, r *http.Request) {
	ns, name, container := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	pod, err := n.kube.CoreV1().Pods(ns).Get(r.Context(), name, metav1.GetOptions{})
	if err != nil || pod.Spec.NodeName != n.opts.Name {
		http.Error(w, fmt.Sprintf("pod %s/%s is not on node %s", ns, name, n.opts.Name), http.StatusNotFound)
		return
	}
	path := filepath.Join(n.opts.StateDir, "pods", string(pod.UID), "logs", container+".log")
	f, err := os.Open(path)
	if err != nil {
		http.Error(w, fmt.Sprintf("container %q of pod %s/%s has no log yet", container, ns, name), http.StatusNotFound)
		return
	}
	defer f.Close()
	q := r.URL.Query()
	if tail, err := strconv.Atoi(q.Get("tailLines")); err == nil && tail >= 0 {
		if err := seekTail(f, tail); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
	}
	var out io.Writer = w
	if limit, err := strconv.ParseInt(q.Get("limitBytes"), 10, 64); err == nil && limit > 0 {
		out = &limitedWriter{w: w, left: limit}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if _, err := io.Copy(out, f); err != nil || q.Get("follow") != "true" {
		return
	}
	follow(r.Context(), w, out, f)
}

// follow streams what the container appends until the client goes away.
func follow(ctx context.Context, w http.ResponseWriter, out io.Writer, f *os.File) {
	flusher, _ := w.(http.Flusher)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		if flusher != nil {
			flusher.Flush()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if _, err := io.Copy(out, f); err != nil {
			return
		}
	}
}

// seekTail positions f at the start of its last n lines.
func seekTail(f *os.File, n int) error {
	data, err := io.ReadAll(f)
	if err != nil {
		return err
	}
	text := strings.TrimSuffix(string(data), "\n")
	lines := 0
	offset := 0
	for i := len(text) - 1; i >= 0; i-- {
		if text[i] == '\n' {
			lines++
			if lines == n {
				offset = i + 1
				break
			}
		}
	}
	if n == 0 {
		offset = len(data)
	}
	_, err = f.Seek(int64(offset), io.SeekStart)
	return err
}

type limitedWriter struct {
	w    io.Writer
	left int64
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if l.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.w.Write(p)
	l.left -= int64(n)
	return n, err
}

// selfSignedCert makes the endpoint's serving certificate for ip. The API server
// does not verify kubelet certificates unless told to.
func selfSignedCert(ip net.IP) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "metalambda-local-node"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{ip},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
