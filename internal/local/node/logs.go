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
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
)

// serveLogs serves the kubelet's container-log endpoint on the node's address, so
// `kubectl logs` works: the API server proxies GET
// /containerLogs/<namespace>/<pod>/<container> to it. It answers with the log file the
// container writes; tailLines, limitBytes and follow are honoured. Only clients with
// a certificate signed by the API server's client CA (the API server's kubelet
// client certificate) get through the TLS handshake.
func (n *Node) serveLogs(ctx context.Context) (func(), error) {
	cert, err := selfSignedCert(n.net.gw)
	if err != nil {
		return nil, err
	}
	cas, err := n.clientCAs(ctx)
	if err != nil {
		return nil, fmt.Errorf("serve container logs: %w", err)
	}
	l, err := tls.Listen("tcp", net.JoinHostPort(n.net.gw.String(), strconv.Itoa(n.opts.KubeletPort)), &tls.Config{
		Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12,
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: cas,
	})
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
	if !hasContainer(pod, container) {
		http.Error(w, fmt.Sprintf("pod %s/%s has no container %q", ns, name, container), http.StatusNotFound)
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

// hasContainer reports whether name is one of the pod's containers.
func hasContainer(pod *corev1.Pod, name string) bool {
	return slices.ContainsFunc(pod.Spec.Containers, func(c corev1.Container) bool { return c.Name == name })
}

// clientExtensionConfigMap is where kube-apiserver publishes its client CA
// (--client-ca-file), for the servers it calls to verify its client certificate.
const clientExtensionConfigMap = "extension-apiserver-authentication"

// clientCAs returns the CAs whose client certificates the log endpoint accepts:
// ClientCAFile's, or the API server's client CA.
func (n *Node) clientCAs(ctx context.Context) (*x509.CertPool, error) {
	pemData, where, err := n.clientCAPEM(ctx)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemData) {
		return nil, fmt.Errorf("%s holds no PEM certificate", where)
	}
	return pool, nil
}

func (n *Node) clientCAPEM(ctx context.Context) ([]byte, string, error) {
	if n.opts.ClientCAFile != "" {
		data, err := os.ReadFile(n.opts.ClientCAFile)
		return data, n.opts.ClientCAFile, err
	}
	where := "kube-system/" + clientExtensionConfigMap
	var data string
	err := wait.PollUntilContextTimeout(ctx, time.Second, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		cm, err := n.kube.CoreV1().ConfigMaps("kube-system").Get(ctx, clientExtensionConfigMap, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil // kube-apiserver writes it soon after it starts
		}
		if err != nil {
			return false, err
		}
		data = cm.Data["client-ca-file"]
		return true, nil
	})
	if err != nil {
		return nil, where, fmt.Errorf("read the API server's client CA from %s: %w", where, err)
	}
	if data == "" {
		return nil, where, fmt.Errorf("%s has no client-ca-file: start kube-apiserver with --client-ca-file and --kubelet-client-certificate, or set the node's ClientCAFile", where)
	}
	return []byte(data), where, nil
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
