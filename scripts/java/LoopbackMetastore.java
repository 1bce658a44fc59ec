// The Hive metastore's Thrift service on one address only (127.0.0.1 unless given).
//
// Hive 2.3's HiveMetaStore (the one Spark ships) always listens on every interface: it has
// no bind-host setting (hive.metastore.thrift.bind.host came with Hive 3), and the local
// metastore has no authentication. This starts the same handler as HiveMetaStore's main,
// behind a server socket bound to the address given. Run by scripts/local-stack as a
// single-file source program (java LoopbackMetastore.java HOST PORT), on Spark's jars.
import java.net.InetSocketAddress;

import org.apache.hadoop.hive.conf.HiveConf;
import org.apache.hadoop.hive.metastore.HiveMetaStore;
import org.apache.hadoop.hive.metastore.IHMSHandler;
import org.apache.hadoop.hive.metastore.RetryingHMSHandler;
import org.apache.hadoop.hive.metastore.TSetIpAddressProcessor;
import org.apache.thrift.protocol.TBinaryProtocol;
import org.apache.thrift.server.TThreadPoolServer;
import org.apache.thrift.transport.TServerSocket;
import org.apache.thrift.transport.TTransportFactory;

public class LoopbackMetastore {
    public static void main(String[] args) throws Exception {
        String host = args[0];
        int port = Integer.parseInt(args[1]);
        HiveConf conf = new HiveConf(HiveMetaStore.HMSHandler.class);
        IHMSHandler handler = RetryingHMSHandler.getProxy(
            conf, new HiveMetaStore.HMSHandler("loopback metastore", conf, false), false);
        TServerSocket socket = new TServerSocket(new InetSocketAddress(host, port));
        TThreadPoolServer.Args server = new TThreadPoolServer.Args(socket)
            .processor(new TSetIpAddressProcessor<IHMSHandler>(handler))
            .transportFactory(new TTransportFactory())
            .protocolFactory(new TBinaryProtocol.Factory())
            .minWorkerThreads(conf.getIntVar(HiveConf.ConfVars.METASTORESERVERMINTHREADS))
            .maxWorkerThreads(conf.getIntVar(HiveConf.ConfVars.METASTORESERVERMAXTHREADS));
        System.err.println("metastore: listening on " + host + ":" + port);
        new TThreadPoolServer(server).serve();
    }
}
