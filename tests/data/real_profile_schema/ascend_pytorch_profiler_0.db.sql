-- CREATE statements (schema only, no data) of ascend_pytorch_profiler_0.db in ../shared/real-profiles/alexnet-910b/db/level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/
-- (a torch_npu db export of AlexNet on Ascend 910B; see ../shared/real-profiles/README.md)
-- (sqlite_sequence, which SQLite creates itself for the AUTOINCREMENT tables, is left out)
CREATE TABLE ACC_PMU (accId INTEGER,readBwLevel INTEGER,writeBwLevel INTEGER,readOstLevel INTEGER,writeOstLevel INTEGER,timestampNs NUMERIC,deviceId INTEGER);
CREATE TABLE AICORE_FREQ (deviceId INTEGER,timestampNs NUMERIC,freq INTEGER);
CREATE TABLE CANN_API (startNs INTEGER,endNs INTEGER,type INTEGER,globalTid INTEGER,connectionId INTEGER PRIMARY KEY,name INTEGER, depth integer);
CREATE TABLE COMMUNICATION_OP (opName INTEGER,startNs INTEGER,endNs INTEGER,connectionId INTEGER,groupName INTEGER,opId INTEGER PRIMARY KEY,relay INTEGER,retry INTEGER,dataType INTEGER,algType INTEGER,count NUMERIC,opType INTEGER, waitNs INTEGER);
CREATE TABLE COMMUNICATION_TASK_INFO (name INTEGER,globalTaskId INTEGER,taskType INTEGER,planeId INTEGER,groupName INTEGER,notifyId INTEGER,rdmaType INTEGER,srcRank INTEGER,dstRank INTEGER,transportType INTEGER,size INTEGER,dataType INTEGER,linkType INTEGER,opId INTEGER);
CREATE TABLE COMPUTE_TASK_INFO (name INTEGER,globalTaskId INTEGER PRIMARY KEY,blockDim INTEGER,mixBlockDim INTEGER,taskType INTEGER,opType INTEGER,inputFormats INTEGER,inputDataTypes INTEGER,inputShapes INTEGER,outputFormats INTEGER,outputDataTypes INTEGER,outputShapes INTEGER,attrInfo INTEGER, waitNs INTEGER);
CREATE TABLE CONNECTION_IDS (id INTEGER, connectionId INTEGER);
CREATE TABLE ENUM_API_TYPE (id INTEGER PRIMARY KEY,name TEXT);
CREATE TABLE ENUM_HCCL_DATA_TYPE (id INTEGER PRIMARY KEY,name TEXT);
CREATE TABLE ENUM_HCCL_LINK_TYPE (id INTEGER PRIMARY KEY,name TEXT);
CREATE TABLE ENUM_HCCL_RDMA_TYPE (id INTEGER PRIMARY KEY,name TEXT);
CREATE TABLE ENUM_HCCL_TRANSPORT_TYPE (id INTEGER PRIMARY KEY,name TEXT);
CREATE TABLE ENUM_MODULE (id INTEGER PRIMARY KEY,name TEXT);
CREATE TABLE ENUM_MSTX_EVENT_TYPE (id INTEGER PRIMARY KEY,name TEXT);
CREATE TABLE HBM (deviceId INTEGER,timestampNs INTEGER,bandwidth NUMERIC,hbmId INTEGER,type INTEGER);
CREATE TABLE HOST_INFO (hostUid TEXT,hostName TEXT);
CREATE TABLE LLC (deviceId INTEGER,llcId INTEGER,timestampNs INTEGER,hitRate REAL,throughput INTEGER,mode INTEGER);
CREATE TABLE MEMORY_RECORD (component INTEGER, timestamp INTEGER, totalAllocated INTEGER, totalReserved INTEGER, totalActive INTEGER, streamPtr INTEGER, deviceId INTEGER);
CREATE TABLE META_DATA (name TEXT,value TEXT);
CREATE TABLE NPU_INFO (id INTEGER,name TEXT);
CREATE TABLE NPU_MEM (type INTEGER,ddr NUMERIC,hbm NUMERIC,timestampNs INTEGER,deviceId INTEGER);
CREATE TABLE NPU_MODULE_MEM (moduleId INTEGER,timestampNs INTEGER,totalReserved NUMERIC,deviceId INTEGER);
CREATE TABLE NPU_OP_MEM (operatorName INTEGER,addr INTEGER,type INTEGER,size INTEGER,timestampNs INTEGER,globalTid INTEGER,totalAllocate NUMERIC,totalReserve NUMERIC,component INTEGER,deviceId INTEGER);
CREATE TABLE OP_MEMORY (name INTEGER, size INTEGER, allocationTime INTEGER, releaseTime INTEGER, activeReleaseTime INTEGER, duration INTEGER, activeDuration INTEGER, allocationTotalAllocated INTEGER, allocationTotalReserved INTEGER, allocationTotalActive INTEGER, releaseTotalAllocated INTEGER, releaseTotalReserved INTEGER, releaseTotalActive INTEGER, streamPtr INTEGER, deviceId INTEGER);
CREATE TABLE OVERLAP_ANALYSIS (id INTEGER PRIMARY KEY AUTOINCREMENT, deviceId integer, startNs integer, endNs integer, type integer);
CREATE TABLE PYTORCH_API (startNs TEXT, endNs TEXT, globalTid INTEGER, connectionId INTEGER, name INTEGER, sequenceNumber INTEGER, fwdThreadId INTEGER, inputDtypes INTEGER, inputShapes INTEGER, callchainId INTEGER, type INTEGER, depth integer);
CREATE TABLE PYTORCH_CALLCHAINS (id INTEGER, stack INTEGER, stackDepth INTEGER);
CREATE TABLE RANK_DEVICE_MAP (rankId INTEGER, deviceId INTEGER);
CREATE TABLE SESSION_TIME_INFO (startTimeNs INTEGER,endTimeNs INTEGER);
CREATE TABLE SOC_BANDWIDTH_LEVEL (l2BufferBwLevel INTEGER,mataBwLevel INTEGER,timestampNs NUMERIC,deviceId INTEGER);
CREATE TABLE STEP_TIME (id INTEGER, startNs INTEGER, endNs INTEGER);
CREATE TABLE STRING_IDS (id INTEGER PRIMARY KEY,value TEXT);
CREATE TABLE TASK (startNs INTEGER,endNs INTEGER,deviceId INTEGER,connectionId INTEGER,globalTaskId INTEGER,globalPid INTEGER,taskType INTEGER,contextId INTEGER,streamId INTEGER,taskId INTEGER,modelId INTEGER, depth integer);
CREATE TABLE TASK_PMU_INFO (globalTaskId INTEGER,name INTEGER,value NUMERIC);
CREATE TABLE connectionCats(connectionId INT,cat);
CREATE TABLE status_info(id INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT, value TEXT);
