// tfring._core.StoreServer / StoreClient: the job's authenticated rendezvous store, for the
// launcher, tests and tools. Blocking calls release the GIL.
#include "bindings.h"

#include "rendezvous/tcp_store.h"

namespace tfring {
namespace python {

void BindStore(py::module_& m) {
  py::class_<TcpStoreServer>(m, "StoreServer",
                             "The job's authenticated rendezvous store (served by tfringrun).")
      .def(py::init([](const std::string& host, int port, const std::string& secret) {
             auto server = std::make_unique<TcpStoreServer>();
             Check(server->Start(host, port, secret));
             return server;
           }),
           py::arg("host"), py::arg("port"), py::arg("secret"))
      .def_property_readonly("port", &TcpStoreServer::port)
      .def_property_readonly("refused_connections", &TcpStoreServer::refused_connections)
      .def("stop", [](TcpStoreServer& s) {
        py::gil_scoped_release release;
        s.Stop();
      });

  py::class_<TcpStoreClient>(m, "StoreClient", "A client of the job's store (tests, tools).")
      .def(py::init([](const std::string& host, int port, const std::string& secret, double timeout) {
             std::unique_ptr<TcpStoreClient> c;
             Status st;
             {
               py::gil_scoped_release release;
               st = TcpStoreClient::Connect(host, port, secret, timeout, timeout, &c);
             }
             Check(st);
             return c;
           }),
           py::arg("host"), py::arg("port"), py::arg("secret"), py::arg("timeout") = 10.0)
      .def("set", [](TcpStoreClient& c, const std::string& k, const py::bytes& v) {
        Check(c.Set(k, std::string(v)));
      })
      .def("get", [](TcpStoreClient& c, const std::string& k, double timeout) {
        std::string v;
        Status st;
        {
          py::gil_scoped_release release;
          st = c.Get(k, timeout, &v);
        }
        Check(st);
        return py::bytes(v);
      }, py::arg("key"), py::arg("timeout") = 10.0)
      .def("add", [](TcpStoreClient& c, const std::string& k, int64_t delta) {
        int64_t v = 0;
        Check(c.Add(k, delta, &v));
        return v;
      });
}

}  // namespace python
}  // namespace tfring
